package admintest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ndigo/ndigo/internal/admintest"
)

// The fixture answers each case as the contract says, with a JSON body.
func TestContract(t *testing.T) {
	open := httptest.NewServer(admintest.NewCluster("tok", admintest.Task{Name: "a/b.c"}).Node("n"))
	defer open.Close()
	closed := httptest.NewServer(admintest.NewCluster("", admintest.Task{Name: "a/b.c"}).Node("n"))
	defer closed.Close()
	defer http.DefaultClient.CloseIdleConnections()
	for _, tc := range []struct {
		srv          *httptest.Server
		method, path string
		token        string
		code         int
		header, want string // a header the answer must have, and its value
	}{
		{open, "GET", "/scheduledtasks", "", 200, "", ""},
		{open, "GET", "/scheduledtasks/a%2Fb.c/runs", "", 200, "", ""},
		{open, "POST", "/scheduledtasks/a%2Fb.c/run", "tok", 202, "", ""},
		{open, "POST", "/scheduledtasks/a%2Fb.c/pause", "tok", 200, "", ""},
		{open, "POST", "/scheduledtasks/a%2Fb.c/resume", "tok", 200, "", ""},
		{open, "POST", "/scheduledtasks/a%2Fb.c/pause", "", 401, "WWW-Authenticate", "Bearer"},
		{open, "POST", "/scheduledtasks/a%2Fb.c/pause", "bad", 401, "WWW-Authenticate", "Bearer"},
		{closed, "POST", "/scheduledtasks/a%2Fb.c/pause", "tok", 403, "", ""},
		{open, "POST", "/scheduledtasks/nope/pause", "tok", 404, "", ""},
		{open, "GET", "/scheduledtasks/nope/runs", "", 404, "", ""},
		{open, "GET", "/scheduledtasks/runs?name=a%2Fb.c", "", 200, "", ""},
		{open, "POST", "/scheduledtasks/pause?name=a%2Fb.c", "tok", 200, "", ""},
		{open, "POST", "/scheduledtasks/pause?name=a%2Fb.c", "", 401, "WWW-Authenticate", "Bearer"},
		{open, "GET", "/scheduledtasks/runs?name=nope", "", 404, "", ""},
		{open, "GET", "/scheduledtasks/a%2Fb.c/pause", "tok", 405, "Allow", "POST"},
		{open, "POST", "/scheduledtasks", "tok", 405, "Allow", "GET"},
	} {
		req, err := http.NewRequest(tc.method, tc.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || err != nil {
			t.Errorf("%s %s: %d (%v), want %d and JSON", tc.method, tc.path, resp.StatusCode, err, tc.code)
		}
		if msg, _ := body["error"].(string); tc.code >= 400 && msg == "" {
			t.Errorf("%s %s: no error message in %v", tc.method, tc.path, body)
		}
		if tc.header != "" && resp.Header.Get(tc.header) != tc.want {
			t.Errorf("%s %s: %s %q, want %q", tc.method, tc.path, tc.header, resp.Header.Get(tc.header), tc.want)
		}
	}
}
