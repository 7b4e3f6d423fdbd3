package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

// etcdDriver stands for a lock driver of your own whose backend can be
// down: implementing locks.HealthChecker gives it a /healthz check.
type etcdDriver struct {
	locks.Driver
	down bool
}

func (d etcdDriver) CheckHealth(context.Context) error {
	if d.down {
		return errors.New("etcd at 10.0.0.9:2379: connection refused")
	}
	return nil
}

// A Handler you build yourself gets the checks of its scheduler's driver
// and store from BackendChecks, as admin.Module adds them.
func ExampleBackendChecks() {
	driver := etcdDriver{Driver: locks.NewInProcessDriver(), down: true}
	s := scheduling.New(scheduling.Config{Driver: driver})
	h, err := admin.New(admin.Options{Scheduler: s, Checks: admin.BackendChecks(driver, nil)})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	fmt.Print(rec.Code, " ", rec.Body)
	// Output:
	// 503 {
	//   "status": "unavailable",
	//   "driver": "admin_test.etcdDriver",
	//   "checks": {
	//     "locks": "etcd at 10.0.0.9:2379: connection refused"
	//   }
	// }
}
