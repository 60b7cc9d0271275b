package server

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReferenceDocumentsTheAPI keeps the reference (serve --help), the
// package documentation, the routes, the error codes and the wire types
// in step.
func TestReferenceDocumentsTheAPI(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	doc := f.Doc.Text()
	for _, line := range strings.Split(Reference, "\n") {
		if strings.TrimSpace(line) != "" {
			assert.Contains(t, doc, line, "the package doc lacks a reference line")
		}
	}

	s, err := New(Options{Config: testConfig, Registry: registry})
	require.NoError(t, err)
	for path, rt := range s.routes {
		assert.Contains(t, Reference, rt.method+" "+path, "the reference lacks a route")
	}
	for key := range s.sessionRoutes {
		assert.Contains(t, Reference, key, "the reference lacks a session route")
	}

	// Every code, with the status its comment names.
	src, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, parser.ParseComments)
	require.NoError(t, err)
	status := regexp.MustCompile(`\b([1-5]\d\d)\b`)
	codes := 0
	ast.Inspect(src, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
			return true
		}
		codes++
		code, _ := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
		for _, m := range status.FindAllString(vs.Comment.Text(), -1) {
			n, _ := strconv.Atoi(m)
			assert.NotEmpty(t, http.StatusText(n), "%s names status %s", vs.Names[0].Name, m)
			assert.Regexp(t, `(?m)^  `+m+` `+code+`\b`, Reference, "the reference lacks the row for %s", vs.Names[0].Name)
		}
		return true
	})
	require.GreaterOrEqual(t, codes, 10, "error codes found in errors.go")

	// Every JSON field of the wire types is named in the reference.
	for _, v := range []any{CompactRequest{}, CompactOptions{}, Thresholds{}, CompactReport{}, CompactResponse{}, Context{}, Plan{},
		CheckRequest{}, CheckResponse{}, GateRequest{}, Budget{}, Decision{}, TruncateRequest{}, TruncateResponse{},
		PluginInfo{}, PluginsResponse{}, Health{}, SessionRequest{}, AppendRequest{}, SessionUpdate{}, SessionView{}, SessionDeleted{}} {
		for _, name := range jsonFields(reflect.TypeOf(v)) {
			assert.Contains(t, Reference, `"`+name+`"`, "the reference does not name a field of %T", v)
		}
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, jsonFields(ft)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
