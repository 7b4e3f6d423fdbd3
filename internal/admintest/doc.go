// Package admintest is a test fixture for the clients of admin.Handler's
// control contract, the ndigo CLI and the web console: HTTP nodes that
// answer GET /scheduledtasks, GET /scheduledtasks/{name}/runs and
// POST /scheduledtasks/{name}/run, /pause and /resume as that contract
// says, over one in-memory [Cluster] state that several nodes share.
//
// It runs nothing: a run request is counted, and runs are what the test
// adds with [Cluster.AddRun]. What it is for is what a client must get
// right without a scheduler behind it: formatting, path escaping of task
// names, the bearer token on mutations only, and the error bodies of 401,
// 403, 404 and 405.
package admintest
