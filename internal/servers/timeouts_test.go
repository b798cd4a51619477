// Package servers_test holds repository-wide checks of the HTTP servers podfence runs.
package servers_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryServerHasTimeouts: every http.Server literal in the repository's non-test Go
// files bounds a request's reading (ReadTimeout or ReadHeaderTimeout), the writing of its
// answer (WriteTimeout) and idle kept-alive connections (IdleTimeout), and none serves with
// http.ListenAndServe or http.Serve (no timeouts at all). Without them a client holds a
// connection, and its memory, as long as it likes.
func TestEveryServerHasTimeouts(t *testing.T) {
	root := moduleRoot(t)
	servers := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		found, problems, err := check(rel, src)
		if err != nil {
			return err
		}
		servers += found
		for _, p := range problems {
			t.Error(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if servers == 0 {
		t.Fatal("no http.Server literal found: is the walk looking at the repository?")
	}
	t.Logf("%d http.Server literals checked", servers)
}

// TestCheckFindsMissingTimeouts: the check itself sees a literal without timeouts, under an
// import alias and behind &, and http.ListenAndServe; it accepts a literal with them.
func TestCheckFindsMissingTimeouts(t *testing.T) {
	const src = `package p

import (
	"time"

	nethttp "net/http"
)

var bad = &nethttp.Server{Addr: ":80", ReadHeaderTimeout: time.Second}

var good = nethttp.Server{ReadHeaderTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second}

func serve() error { return nethttp.ListenAndServe(":80", nil) }
`
	n, problems, err := check("p.go", []byte(src))
	want := []string{"p.go:9: http.Server literal without WriteTimeout, IdleTimeout",
		"p.go:13: http.ListenAndServe serves without timeouts: use an http.Server with them"}
	if err != nil || n != 2 || !slices.Equal(problems, want) {
		t.Errorf("check = %d, %q, %v; want 2, %q", n, problems, err, want)
	}
}

// check returns how many http.Server literals src has and those lacking a timeout.
func check(name string, src []byte) (int, []string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return 0, nil, fmt.Errorf("parse: %w", err)
	}
	pkg := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "net/http" {
			pkg = "http"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" || pkg == "_" || pkg == "." {
		return 0, nil, nil
	}
	n := 0
	var problems []string
	ast.Inspect(f, func(node ast.Node) bool {
		if call, ok := node.(*ast.CallExpr); ok {
			if fn := selected(call.Fun, pkg); fn == "ListenAndServe" || fn == "ListenAndServeTLS" || fn == "Serve" || fn == "ServeTLS" {
				problems = append(problems, fmt.Sprintf("%s:%d: http.%s serves without timeouts: use an http.Server with them", name,
					fset.Position(call.Pos()).Line, fn))
			}
		}
		lit, ok := node.(*ast.CompositeLit)
		if !ok || selected(lit.Type, pkg) != "Server" {
			return true
		}
		n++
		set := map[string]bool{}
		for _, e := range lit.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok {
					set[id.Name] = true
				}
			}
		}
		var missing []string
		if !set["ReadTimeout"] && !set["ReadHeaderTimeout"] {
			missing = append(missing, "ReadTimeout or ReadHeaderTimeout")
		}
		for _, field := range []string{"WriteTimeout", "IdleTimeout"} {
			if !set[field] {
				missing = append(missing, field)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: http.Server literal without %s", name, fset.Position(lit.Pos()).Line,
				strings.Join(missing, ", ")))
		}
		return true
	})
	return n, problems, nil
}

// selected is the name x selects from package pkg (Server for http.Server), or "".
func selected(x ast.Expr, pkg string) string {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
		return sel.Sel.Name
	}
	return ""
}

// moduleRoot is the directory of the repository's go.mod, above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/podfence/podfence\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of github.com/podfence/podfence above the test's directory")
		}
		dir = parent
	}
}
