// Package docs holds the machine-readable documents the binary serves. The
// OpenAPI description of the HTTP API is embedded from openapi.json, so the
// file in the repository is the one copy: what GET /api/openapi.json
// answers and what httpapi's tests check responses against.
package docs

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API. The slice is
// shared: callers must not modify it.
func OpenAPI() []byte { return openAPI }
