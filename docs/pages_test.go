package docs_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file reads the pages for their walk-throughs: their sections, their
// fenced blocks, the shell lines in them, and the outputs they show.

// A block is a fenced block of a page.
type block struct {
	shell bool // ```sh; else an output block
	text  string
}

// blocks returns the fenced blocks of a page's section that are shell
// commands (```sh) or what they print (``` without a language).
func blocks(sec string) []block {
	var out []block
	for _, m := range regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```").FindAllStringSubmatch(sec, -1) {
		if m[1] == "sh" || m[1] == "" {
			out = append(out, block{shell: m[1] == "sh", text: m[2]})
		}
	}
	return out
}

func readPage(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pageSection returns the part of page from heading to the next heading of
// its level or above, outside fenced blocks.
func pageSection(t testing.TB, page, heading string) string {
	t.Helper()
	i := strings.Index(page, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("the page has no section %q", heading)
	}
	sec := page[i+1:]
	level := strings.Index(heading, " ")
	fenced := false
	n := len(heading) + 1
	for line := range strings.SplitAfterSeq(sec[n:], "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if h := strings.Index(line, " "); !fenced && h > 0 && h <= level && strings.Trim(line[:h], "#") == "" {
			return sec[:n]
		}
		n += len(line)
	}
	return sec
}

// keyColumns are the columns of ndigo's tables whose text does not change
// from one run of the walk-through to the next.
var keyColumns = []string{"NAME", "CRON", "LOCK", "PAUSED", "STATUS"}

// checkSample fails t unless what a command printed (got) shows what the
// page's output block sample shows: each table header as it is; each row of
// a table with as many cells, and the same text in the columns keys; each
// other line as it is but for its numbers and instants; "exit N" as it is.
func checkSample(t testing.TB, sample string, got []string, keys []string) {
	t.Helper()
	var header []string
	var rows [][]string // got's rows under the header
	for _, s := range lines(sample) {
		c := cellsOf(s)
		switch {
		case regexp.MustCompile(`^[A-Z][A-Z ()]*$`).MatchString(s):
			header, rows = c, nil
			i := slices.IndexFunc(got, func(g string) bool { return slices.Equal(cellsOf(g), c) })
			if i < 0 {
				t.Errorf("the page shows the header\n%s\nwhich the output lacks:\n%s", s, strings.Join(got, "\n"))
				continue
			}
			for _, g := range got[i+1:] {
				if gc := cellsOf(g); len(gc) == len(c) {
					rows = append(rows, gc)
				}
			}
		case header != nil && len(c) == len(header):
			ok := slices.ContainsFunc(rows, func(r []string) bool {
				for i, h := range header {
					if slices.Contains(keys, h) && r[i] != c[i] {
						return false
					}
				}
				return true
			})
			if !ok {
				t.Errorf("the page shows the row\n%s\nand the output has none like it:\n%s", s, strings.Join(got, "\n"))
			}
		case strings.HasPrefix(s, "exit "):
			if !slices.Contains(got, s) {
				t.Errorf("the page shows %q; the output:\n%s", s, strings.Join(got, "\n"))
			}
		default:
			if !slices.ContainsFunc(got, func(g string) bool { return shape(g) == shape(s) }) {
				t.Errorf("the page shows the line\n%s\nand the output has none like it:\n%s", s, strings.Join(got, "\n"))
			}
		}
	}
}

// cellsOf splits a table line into its cells, which two spaces or more
// separate.
func cellsOf(s string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(s), -1)
}

// shape is s with its instants and numbers replaced, and its spaces
// collapsed.
func shape(s string) string {
	s = regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z`).ReplaceAllString(s, "T")
	s = regexp.MustCompile(`\d+(\.\d+)?`).ReplaceAllString(s, "N")
	return strings.Join(strings.Fields(s), " ")
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// shellWords splits a line of a shell block into words, as a POSIX shell
// does for the forms the pages use: single and double quotes, a comment
// from a # that starts a word, and ; | & as words of their own.
func shellWords(t testing.TB, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in := false // a word is started
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				t.Fatalf("%q: unclosed quote", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !in:
			i = len(line)
		case c == ';' || c == '|' || c == '&':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
			words = append(words, string(c))
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
