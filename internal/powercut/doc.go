// Package powercut models a power cut for tests: it runs a process under
// ptrace, copies every regular file of a directory at each fsync or
// fdatasync the process makes of it, and after the process is killed
// rolls each file back to its copy at its last sync, as a disk would
// hold it once the page cache is gone. A file the process never synced
// is deleted.
//
// What it does not model: a copy is taken when a sync starts, while other
// threads may still write to the file (the copy can hold more than the
// disk would, never less of what was written before the sync); directory
// entries (creates, renames, deletes) are taken as durable; memory-mapped
// writes are not seen (SQLite's -shm, rebuilt on open, is deleted).
//
// It runs on linux/amd64 only (ptrace and that architecture's syscall
// numbers); elsewhere the package is empty.
package powercut
