// Package health holds the plain data of cg's health reporting: what the
// engine found wrong and the typed remedy that goes with it, so that an
// embedder (or the cg command line) can word the fix in its own terms.
// It is a leaf: it imports nothing of cg, and cg builds its check report
// from these types.
package health
