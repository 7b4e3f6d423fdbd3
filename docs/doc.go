// Package docs holds the project's documentation pages and the tests that
// keep them true: BAD-INPUT.md's table is generated from the errors that
// bad_input_test.go asserts, so the page cannot drift from the code.
package docs
