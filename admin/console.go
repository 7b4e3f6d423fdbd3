package admin

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

// consolePage is the web console: one page whose script calls the
// handler's own endpoints by relative URLs, so that it works wherever the
// handler is mounted, with no asset from elsewhere.
//
//go:embed console.html
var consolePage []byte

// consolePolicy lets the page run only its own inline script and style
// and talk only to its origin: a task name that slipped into the page as
// markup could not run or send anything.
var consolePolicy = "default-src 'none'; script-src " + inlineHash(consolePage, "script") +
	"; style-src " + inlineHash(consolePage, "style") +
	"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash returns the CSP source of the page's first inline element
// tag, 'none' if it has none.
func inlineHash(page []byte, tag string) string {
	_, rest, ok := bytes.Cut(page, []byte("<"+tag+">"))
	body, _, closed := bytes.Cut(rest, []byte("</"+tag+">"))
	if !ok || !closed {
		return "'none'"
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// console serves the web console at GET /.
func (h *Handler) console(w http.ResponseWriter, _ *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", consolePolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(consolePage)
}
