// Package docs holds no Go code: it is the home of leasecron's
// documentation pages (Markdown). Its tests check that every relative link
// in them, in the README and in docs/reliability.md and BENCHMARKS.md points to
// a file (and heading) that exists, and that the library examples quoted
// in library.md are exactly the compiled ones in lease/example_test.go.
package docs
