// Package console holds the admin console that every node serves at /_/:
// plain ES modules, CSS and one HTML page, embedded in the binary, built on
// the JavaScript SDK the node serves at /_/sdk/edgebase.js. No build step, no
// npm, no CDN: it works offline on a private network.
package console

import "embed"

// Static is the console's files: static/index.html, static/*.js,
// static/*.css and static/pages/*.js.
//
//go:embed static
var Static embed.FS
