package pglocks

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The statements, with $LOCKS and $CLAIMS standing for the quoted table
// names and $EXPIRY for the claim table's expiry index. Keys, namespaces, tokens and TTLs are always bind parameters.
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

// newStatements fills in the tables named by locks and claims, each a table
// name optionally preceded by its schema.
func newStatements(locks, claims []string) statements {
	r := strings.NewReplacer("$LOCKS", pgx.Identifier(locks).Sanitize(), "$CLAIMS", pgx.Identifier(claims).Sanitize(),
		"$EXPIRY", pgx.Identifier{expiryIndex(claims)}.Sanitize())
	return statements{
		schema:  r.Replace(schemaSQL),
		acquire: r.Replace(acquireSQL),
		extend:  r.Replace(extendSQL),
		release: r.Replace(releaseSQL),
		guard:   r.Replace(guardSQL),
		claim:   r.Replace(claimSQL),
	}
}

// expiryIndex names the claim table's expiry index after a hash of the
// table's qualified name: the name plus a suffix could pass PostgreSQL's
// 63-byte limit, and an index takes its table's schema, so the name must be
// unique among the tables of a schema by itself.
func expiryIndex(claims []string) string {
	sum := sha256.Sum256([]byte(strings.Join(claims, ".")))
	return "ndigo_claims_expiry_" + hex.EncodeToString(sum[:8])
}
