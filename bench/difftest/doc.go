// Package difftest runs the same random sequences of API calls on bbolt
// v1.5.0 and on rivet and compares every answer: return values, errors
// (by the bbolt error each matches), panics, and the whole database after
// each commit. Its tests are the package; see difftest_test.go for the
// flags that make a run longer, and known_test.go for the differences that
// are rivet's on purpose.
package difftest
