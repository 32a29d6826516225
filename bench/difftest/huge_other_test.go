//go:build !linux && !darwin

package difftest

// hugeValue is nil where no mapping reserves address space cheaply: the
// runs then make no value longer than MaxValueSize.
func hugeValue() []byte { return nil }
