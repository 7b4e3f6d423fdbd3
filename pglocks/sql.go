package pglocks

import (
	_ "embed"
	"strings"
)

// The statements, with $LOCKS and $CLAIMS standing for the quoted table
// names. Keys, namespaces, tokens and TTLs are always bind parameters.
var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed acquire.sql
	acquireSQL string
	//go:embed extend.sql
	extendSQL string
	//go:embed release.sql
	releaseSQL string
	//go:embed guard.sql
	guardSQL string
	//go:embed claim.sql
	claimSQL string
)

// statements are the driver's SQL with its table names filled in.
type statements struct {
	schema, acquire, extend, release, guard, claim string
}

func newStatements(locksTable, claimsTable string) statements {
	r := strings.NewReplacer("$LOCKS", locksTable, "$CLAIMS", claimsTable)
	return statements{
		schema:  r.Replace(schemaSQL),
		acquire: r.Replace(acquireSQL),
		extend:  r.Replace(extendSQL),
		release: r.Replace(releaseSQL),
		guard:   r.Replace(guardSQL),
		claim:   r.Replace(claimSQL),
	}
}
