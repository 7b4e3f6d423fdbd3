package admintest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ndigo/ndigo/internal/admintest"
)

// Two nodes share one cluster: a pause through one shows on the other.
func Example() {
	cluster := admintest.NewCluster("s3cret", admintest.Task{Name: "Payroll.Close", Cron: "@every 1s"})
	a := httptest.NewServer(cluster.Node("a"))
	defer a.Close()
	b := httptest.NewServer(cluster.Node("b"))
	defer b.Close()

	req, _ := http.NewRequest(http.MethodPost, a.URL+"/scheduledtasks/Payroll.Close/pause", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	task, _ := cluster.Task("Payroll.Close")
	fmt.Println(resp.StatusCode, task.Paused)

	resp, err = http.Get(b.URL + "/scheduledtasks/Payroll.Close/runs")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	fmt.Println(resp.StatusCode, len(cluster.Requests()))
	// Output:
	// 200 true
	// 200 2
}
