package pglocks

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The statements, with $LOCKS and $CLAIMS standing for the quoted table
// names, $TOKENS for the token sequence, $EXPIRY for the claim table's
// expiry index, and $ACQUIRE, $CLAIM and $ACQUIRE_CLAIM for the functions
// of acquire.sql, claim.sql and acquire_claim.sql. Keys, namespaces, tokens and TTLs are always bind
// parameters.
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
	//go:embed acquire_claim.sql
	acquireClaimSQL string
	//go:embed acquire_claims.sql
	acquireClaimsSQL string
	//go:embed members_schema.sql
	membersSchemaSQL string
	//go:embed heartbeat.sql
	heartbeatSQL string
	//go:embed leave.sql
	leaveSQL string
)

// statements are the driver's SQL with its table names filled in.
type statements struct {
	schema, acquire, extend, release, guard, claim string
	acquireClaim, acquireClaims                    string
	tokens                                         string // the token sequence, quoted
	heartbeat, leave                               string // locks.Membership, sent as they are: a heartbeat a second
}

// A function is one of the driver's statements as a PL/pgSQL function, which
// CreateSchema creates beside the tables. PostgreSQL plans the statements
// of a function once per session and keeps the plan, where a statement sent
// as the unnamed statement (which PgBouncer's transaction mode needs) is
// parsed and planned on every call: most of the work of a lock operation.
// The statement refers to its parameters as $1, $2, … as before.
//
// A function that answers one value returns it (RETURNS bigint), and is
// called as SELECT f(…): PostgreSQL then plans and runs a Result node,
// where SELECT * FROM f(…) of a set-returning function adds a function scan
// and a tuplestore to every call.
type function struct {
	op     string // names it
	params string // the parameters' types
	result string // its RETURNS clause: a type, or SETOF a type
	body   string // one statement, whose rows the function returns
	block  bool   // body is a whole PL/pgSQL block (DECLARE … BEGIN … END) instead
}

var functions = []function{
	{"acquire", "text, text, bigint, boolean, boolean", "bigint", acquireSQL, true},
	{"extend", "text, text, bigint, bigint", "SETOF boolean", extendSQL, false},
	{"release", "text, text, bigint, text", "boolean", releaseSQL, true},
	{"claim", "text, text, bigint, bigint", "SETOF boolean", claimSQL, false},
	{"guard", "text, text, bigint", "SETOF boolean", guardSQL, true},
	{"acquire_claim", "text, text, bigint, text, bigint, bigint, boolean, boolean", "bigint", acquireClaimSQL, true},
	{"acquire_claims", "text, text[], bigint[], text[], bigint[], bigint[], boolean[]", "SETOF bigint", acquireClaimsSQL, true},
}

// layout names the table layout the functions are written for. It is part
// of their names, so that the functions of the previous layout (created by
// the previous version, which may still run on some nodes during an
// upgrade, and recreates them when it starts) and these never replace each
// other.
const layout = "v5"

// newStatements fills in the tables named by locks and claims, each a table
// name optionally preceded by its schema. The schema script takes a
// transaction-scoped advisory lock first, so that nodes starting at once
// create the tables and replace the functions one after the other.
func newStatements(locks, claims []string) statements {
	members := append([]string(nil), locks...)
	members[len(members)-1] += membersSuffix
	inSchema := func(name string) []string { return append(locks[:len(locks)-1:len(locks)-1], name) }
	s := statements{tokens: pgx.Identifier(inSchema(objectName("ndigo_tokens_", locks))).Sanitize()}
	fnName := func(op string) string {
		return pgx.Identifier(inSchema(objectName("ndigo_"+op+"_"+layout+"_", locks))).Sanitize()
	}
	r := strings.NewReplacer("$LOCKS", pgx.Identifier(locks).Sanitize(), "$CLAIMS", pgx.Identifier(claims).Sanitize(),
		"$TOKENS", s.tokens, "$EXPIRY", pgx.Identifier{objectName("ndigo_claims_expiry_", claims)}.Sanitize(),
		"$MEMBERS", pgx.Identifier(members).Sanitize(), "$ACQUIRE_CLAIM", fnName("acquire_claim"), "$ACQUIRE", fnName("acquire"), "$CLAIM", fnName("claim"))
	s.heartbeat, s.leave = r.Replace(heartbeatSQL), r.Replace(leaveSQL)
	calls := map[string]*string{"acquire": &s.acquire, "extend": &s.extend, "release": &s.release, "claim": &s.claim, "guard": &s.guard,
		"acquire_claim": &s.acquireClaim, "acquire_claims": &s.acquireClaims}
	var schema strings.Builder
	fmt.Fprintf(&schema, "SELECT pg_advisory_xact_lock(%d);\n%s\n%s", schemaLock(locks), r.Replace(schemaSQL), r.Replace(membersSchemaSQL))
	for _, f := range functions {
		fn := fnName(f.op)
		body := strings.TrimSpace(r.Replace(f.body))
		if !f.block {
			body = "BEGIN\nRETURN QUERY\n" + body + ";\nEND"
		}
		fmt.Fprintf(&schema, "CREATE OR REPLACE FUNCTION %s(%s) RETURNS %s LANGUAGE plpgsql AS $ndigo$\n%s\n$ndigo$;\n",
			fn, f.params, f.result, body)
		args := make([]string, strings.Count(f.params, ",")+1)
		for i, t := range strings.Split(f.params, ", ") {
			args[i] = fmt.Sprintf("$%d::%s", i+1, t)
		}
		call := fn + "(" + strings.Join(args, ", ") + ")"
		if strings.HasPrefix(f.result, "SETOF ") {
			call = "* FROM " + call
		}
		*calls[f.op] = "SELECT " + call
	}
	s.schema = schema.String()
	return s
}

// objectName names an object of the table table after a hash of its
// qualified name: the name plus a suffix could pass PostgreSQL's 63-byte
// limit, and indexes and functions live in the schema, so the name must be
// unique among the tables of a schema by itself.
func objectName(prefix string, table []string) string {
	sum := sha256.Sum256([]byte(strings.Join(table, ".")))
	return prefix + hex.EncodeToString(sum[:8])
}

// schemaLock is the advisory lock key that serializes CreateSchema on the
// table table.
func schemaLock(table []string) int64 {
	sum := sha256.Sum256([]byte("ndigo schema " + strings.Join(table, ".")))
	var k int64
	for _, b := range sum[:8] {
		k = k<<8 | int64(b)
	}
	return k
}
