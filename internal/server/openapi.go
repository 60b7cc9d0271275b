package server

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of the API, served at
// /openapi.json. It is written by hand, for the descriptions, enums and
// error answers that the wire types cannot say; openapi_test.go keeps it
// in step with the routes, the wire types and real answers.
//
//go:embed openapi.json
var OpenAPI []byte

// openapi serves GET /openapi.json. It needs no token: a client
// generator reads it before it has one.
func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ []byte) *apiError {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(OpenAPI) // the client is gone if this fails
	return nil
}
