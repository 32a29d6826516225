// Command prune turns one of bbolt's black-box test files into a test of
// rivet: it rewrites bbolt's import paths to rivet's (and bbolt's internal
// test helpers to rivet's stand-ins in ../shim), removes the test functions
// the skip list names, and then drops imports nothing uses any more.
//
//	prune -skip skip.txt -out DIR FILE...
//
// The skip list has one test per line, "TestName  reason"; blank lines and
// lines starting with # are ignored. Every listed name must exist in some
// FILE, so the list cannot silently go stale.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// rewrites maps bbolt's import paths to rivet's. A path mapped to "" is
// dropped (its users must be on the skip list).
var rewrites = map[string]string{
	"go.etcd.io/bbolt":                   "github.com/rivetkv/rivet",
	"go.etcd.io/bbolt/errors":            "github.com/rivetkv/rivet/errors",
	"go.etcd.io/bbolt/internal/btesting": "github.com/rivetkv/rivet/compat/bboltsuite/shim/btesting",
	"go.etcd.io/bbolt/internal/common":   "github.com/rivetkv/rivet/compat/bboltsuite/shim/common",
	"go.etcd.io/bbolt/internal/guts_cli": "",
	"go.etcd.io/bbolt/internal/freelist": "",
}

func main() {
	skipFile := flag.String("skip", "", "skip list")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	skip, err := readSkip(*skipFile)
	if err != nil {
		fail(err)
	}
	found := map[string]bool{}
	for _, path := range flag.Args() {
		if err := prune(path, *out, skip, found); err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
	}
	for name := range skip {
		if !found[name] {
			fail(fmt.Errorf("skip list names %s, which no test file defines", name))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "prune:", err)
	os.Exit(1)
}

func readSkip(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	skip := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: %s has no reason", path, n, name)
		}
		skip[name] = strings.TrimSpace(reason)
	}
	return skip, sc.Err()
}

func prune(path, out string, skip map[string]string, found map[string]bool) error {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	// Drop the skipped functions (and their doc comments).
	kept := file.Decls[:0]
	for _, d := range file.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
			if _, drop := skip[fn.Name.Name]; drop {
				found[fn.Name.Name] = true
				continue
			}
		}
		kept = append(kept, d)
	}
	file.Decls = kept
	// Comments of dropped functions would be printed loose; keep only
	// those inside what remains.
	var comments []*ast.CommentGroup
	for _, cg := range file.Comments {
		for _, d := range file.Decls {
			if cg.Pos() >= d.Pos() && cg.End() <= d.End() {
				comments = append(comments, cg)
				break
			}
		}
	}
	file.Comments = comments

	used := usedNames(file)
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		specs := gd.Specs[:0]
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			p, _ := strconv.Unquote(is.Path.Value)
			name := filepath.Base(p)
			if is.Name != nil {
				name = is.Name.Name
			}
			if to, ok := rewrites[p]; ok {
				if to == "" {
					continue
				}
				is.Path.Value = strconv.Quote(to)
				if is.Name == nil && p == "go.etcd.io/bbolt" {
					is.Name = ast.NewIdent("bbolt")
				}
			}
			if name != "_" && name != "." && !used[name] {
				continue
			}
			specs = append(specs, is)
		}
		gd.Specs = specs
	}
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, file); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, filepath.Base(path)), buf.Bytes(), 0o644)
}

// usedNames returns the identifiers used as package qualifiers (X in X.Sel).
func usedNames(file *ast.File) map[string]bool {
	used := map[string]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	return used
}
