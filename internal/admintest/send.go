package admintest

import (
	"io"
	"net/http"
	"testing"
)

// Send sends method url with the bearer token ("" for none), as a client
// of the control API does, and returns the response's status and body. A
// request that gets no response fails t. It leaves no idle connection, so
// that a leak check at the end of the test finds no goroutine of it.
func Send(t testing.TB, method, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	http.DefaultClient.CloseIdleConnections()
	return resp.StatusCode, body
}
