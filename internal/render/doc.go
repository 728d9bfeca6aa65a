// Package render turns command results into output: aligned tables,
// key/value blocks, JSON documents and JSON streams, and the colors that
// make members recognisable at a glance. It writes to the writer it is
// given and never decides by itself whether color is on: callers pass
// IOStreams.ColorEnabled() to NewColorScheme.
package render
