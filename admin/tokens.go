package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
)

// DefaultActor is the name of [Options].Token's holder: the actor of a
// control request sent with it.
const DefaultActor = "admin"

// tokenName is the rule of a name of [Options].Tokens: it is the actor
// that the log and a pause's "by" name, so it is short and printable.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// CheckTokenName says why name cannot name a token of [Options].Tokens, or
// returns nil. The reason never quotes name. app registers it as the
// "token_name" configuration rule.
func CheckTokenName(name string) error {
	if !tokenName.MatchString(name) {
		return fmt.Errorf("must be 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit")
	}
	if name == DefaultActor {
		return fmt.Errorf("is the name of admin.token's holder (admin.Options.Token); give that token another name here, or set it as admin.token")
	}
	return nil
}

// actorToken is one accepted token: its holder's name and its SHA-256, so
// that the constant-time comparison does not reveal its length either.
type actorToken struct {
	actor string
	sum   [sha256.Size]byte
}

// actorTokens checks opts' tokens and returns them, or an error naming the
// token by its name (never its value) and the rule it breaks.
func actorTokens(opts Options, log *slog.Logger) ([]actorToken, error) {
	var out []actorToken
	if token := opts.Token.trimmed(); token != "" {
		out = append(out, actorToken{actor: DefaultActor, sum: sha256.Sum256([]byte(token))})
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Tokens)) {
		if err := CheckTokenName(name); err != nil {
			return nil, fmt.Errorf("%w: Tokens[%q] (admin.tokens): the name %v", ErrInvalid, name, err)
		}
		t := opts.Tokens[name]
		token := t.trimmed()
		if token == "" {
			return nil, fmt.Errorf("%w: Tokens[%q] (admin.tokens): the token is empty or only whitespace; give %s a token, or leave it out", ErrInvalid, name, name)
		}
		if token != t {
			log.Warn("admin: an admin token has leading or trailing whitespace, such as a secret file's final newline, "+
				"which no client can send: it is ignored, and clients send the token without it",
				"setting", "admin.tokens", "actor", name, "trimmed_bytes", len(t)-len(token))
		}
		sum := sha256.Sum256([]byte(token))
		for _, o := range out {
			if o.sum == sum {
				// A request would not say who sent it.
				return nil, fmt.Errorf("%w: Tokens[%q] (admin.tokens): the same token as %s's; each holder needs a token of its own", ErrInvalid, name, o.actor)
			}
		}
		out = append(out, actorToken{actor: name, sum: sum})
	}
	return out, nil
}

// actor returns the name of the holder of token, or "" if no token is
// token. Every token is compared, in constant time each, whichever
// matches.
func actor(tokens []actorToken, token string) string {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, t := range tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return ""
	}
	return tokens[found].actor
}
