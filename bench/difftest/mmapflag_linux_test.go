package difftest

import "syscall"

// mmapFlag is a DB.MmapFlags value bbolt honours here (it prefaults the
// map).
const mmapFlag = syscall.MAP_POPULATE
