package redact

import "testing"

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw@h:6379/0":        "redis://:xxxxx@h:6379/0",
		"postgres://u:pw@db:5432/app": "postgres://u:xxxxx@db:5432/app",
		"redis://h:6379":              "redis://h:6379",
		"redis://:?pw@h:6379":         "redis://" + Mark + "@h:6379",
		"host=db user=u password=pw":  Mark,
		"host=db\tpassword=pw":        Mark,
		"localhost:6379":              "localhost:6379",
		"":                            "",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
