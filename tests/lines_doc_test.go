package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestEveryLineTheDaemonSaysIsInTheOperationsDoc: each line the daemon can say, found in the
// code (a say or later call's format, a log Entry's Message, an audit line), has its words in
// docs/operations.md: every fixed part of its format long enough to mean something (what is
// between its %s and %d) is found there. A line added without its row fails here.
func TestEveryLineTheDaemonSaysIsInTheOperationsDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(raw)), " ") // a line's words may wrap
	found := 0
	for _, dir := range []string{"../domain", "../adapters/postgres", "../app"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			for _, line := range linesSaid(t, path) {
				found++
				for _, part := range line.parts {
					if !strings.Contains(doc, part) {
						t.Errorf("%s: the line %q is not in docs/operations.md (missing %q)", line.at, line.format, part)
						break
					}
				}
			}
		}
	}
	if found < 40 {
		t.Fatalf("found %d lines in the code: the finder has lost them", found)
	}
}

// saidLine is one line the code can say: where, its format as written, and its fixed parts.
type saidLine struct {
	at     string
	format string
	parts  []string
}

// verbs are fmt's verbs and what a line puts in (a login, a path, an error): what is between
// them is the line's own words.
var verbs = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]|\x00`)

// linesSaid finds in one file each call that says a line: say(level, consumer, format, ...),
// later(...), audit(c, event, line), once(key, fact, level, format, ...), and each
// ports.Entry's Message.
func linesSaid(t *testing.T, path string) []saidLine {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []saidLine
	add := func(e ast.Expr) {
		format, ok := words(e)
		if !ok {
			return
		}
		var parts []string
		for _, p := range verbs.Split(format, -1) {
			p = strings.Join(strings.Fields(p), " ")
			p = strings.Trim(p, " :;,.()")
			if len(p) >= 8 {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			out = append(out, saidLine{at: fset.Position(e.Pos()).String(), format: format, parts: parts})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch name := sel.Sel.Name; {
			case (name == "say" || name == "later") && len(n.Args) >= 3:
				add(n.Args[2])
			case name == "audit" && len(n.Args) == 3:
				add(n.Args[2])
			case name == "once" && len(n.Args) >= 4: // a fact told once: once(key, fact, level, format, ...)
				add(n.Args[3])
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Entry" {
				return true
			}
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Message" {
						add(kv.Value)
					}
				}
			}
		}
		return true
	})
	return out
}

// words is the text of e where it is made of string literals, fmt.Sprintf of one, and what is
// put in (written \x00); ok is false where e holds no literal at all.
func words(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "\x00", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "\x00", false
		}
		a, okA := words(e.X)
		b, okB := words(e.Y)
		return a + b, okA || okB
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
			return words(e.Args[0])
		}
	case *ast.ParenExpr:
		return words(e.X)
	}
	return "\x00", false
}
