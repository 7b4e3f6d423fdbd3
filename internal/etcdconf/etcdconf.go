// Package etcdconf carries the etcd section of app's configuration to
// etcdlocks.Module through the fx graph. Package app does not import
// etcdlocks, so that an application without etcd does not link etcd's
// client (gRPC, protobuf and their dependencies: 117 packages and about 27
// CPU-seconds more of the payroll example's first build, measured by
// bench/cmd/buildbench); etcdlocks.Module reads this value when the graph
// has no etcdlocks.ModuleConfig of the application's own.
package etcdconf

import "time"

// Section is app.Etcd with its password revealed. Its fields are
// etcdlocks.ModuleConfig's, in the same order, so that etcdlocks converts
// one to the other; the fields are documented there.
type Section struct {
	Endpoints                 []string
	Namespace                 string
	Username                  string
	Password                  string
	CAFile, CertFile, KeyFile string
	DialTimeout               time.Duration
	History                   int
}

// Included is what etcdlocks.Module puts in the graph, so that app's
// Backend, asked for with the etcd section set, knows the module took the
// section rather than being left out.
type Included bool
