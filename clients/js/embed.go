// Package edgebasejs holds the JavaScript SDK (edgebase.js and its types,
// edgebase.d.ts) so that a node can serve it at /_/sdk/edgebase.js: a page
// imports it without a bundler or npm. The tests beside it run the SDK
// under Node against a real node process (node_test.go).
package edgebasejs

import _ "embed"

// Source is edgebase.js, the ES module.
//
//go:embed edgebase.js
var Source []byte

// Types is edgebase.d.ts, its TypeScript declarations.
//
//go:embed edgebase.d.ts
var Types []byte
