package server

import (
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
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, line := range strings.Split(Reference, "\n") {
		if strings.TrimSpace(line) != "" && !strings.Contains(doc, line) {
			t.Errorf("the package doc lacks the reference line %q", line)
		}
	}

	s, err := New(Options{Config: testConfig, Registry: registry})
	if err != nil {
		t.Fatal(err)
	}
	for path, rt := range s.routes {
		if !strings.Contains(Reference, rt.method+" "+path) {
			t.Errorf("the reference lacks %s %s", rt.method, path)
		}
	}

	// Every code, with the status its comment names.
	src, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
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
			if http.StatusText(n) == "" || !regexp.MustCompile(`(?m)^  `+m+` `+code+`\b`).MatchString(Reference) {
				t.Errorf("the reference lacks the row %q for %s", m+" "+code, vs.Names[0].Name)
			}
		}
		return true
	})
	if codes < 10 {
		t.Fatalf("found %d error codes in errors.go", codes)
	}

	// Every JSON field of the wire types is named in the reference.
	for _, v := range []any{CompactRequest{}, CompactOptions{}, Thresholds{}, CompactReport{}, CompactResponse{}, Plan{},
		CheckRequest{}, CheckResponse{}, GateRequest{}, Budget{}, Decision{}, TruncateRequest{}, TruncateResponse{},
		PluginInfo{}, PluginsResponse{}, Health{}} {
		for _, name := range jsonFields(reflect.TypeOf(v)) {
			if !strings.Contains(Reference, `"`+name+`"`) {
				t.Errorf("the reference does not name the field %q of %T", name, v)
			}
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
