package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/scheduling"
)

// Mount the handler on the application's own mux under /admin/.
func Example() {
	s := scheduling.New(scheduling.Config{})
	_ = s.Add(scheduling.NewTask(func(context.Context) error { return nil },
		scheduling.Cron("0 2 * * *"), scheduling.Name("close-books")))

	h, err := admin.New(admin.Options{Scheduler: s, Checks: []admin.Check{
		{Name: "ledger", Check: func(context.Context) error { return nil }},
	}})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/healthz", nil))
	fmt.Print(rec.Code, " ", rec.Body)
	// Output:
	// 200 {
	//   "status": "ok",
	//   "driver": "none",
	//   "checks": {
	//     "ledger": "ok"
	//   }
	// }
}
