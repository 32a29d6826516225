// Package lmdb is a minimal cgo binding of LMDB (liblmdb), just enough for
// the benchmark engine "lmdb": an environment holding one file, named
// databases, write and read transactions, and batched puts, deletes, gets
// and cursor scans — each batch is one call into C, so the figures measure
// LMDB rather than the cost of crossing from Go to C once per key.
//
// The binding is compiled only with cgo and the build tag "lmdb", and needs
// the library and its header (Debian: liblmdb-dev, see bench/setup-lmdb.sh):
//
//	go -C bench test -tags lmdb ./...
//
// Without the tag the package is empty and Available is false.
package lmdb
