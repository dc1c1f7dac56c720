// Package docs holds no Go code: it is the home of leasecron's
// documentation pages (Markdown). Its tests check that every relative link
// in them and in the README points to
// a file (and heading) that exists, and that the library examples quoted
// in library.md are exactly the compiled ones in lease/example_test.go.
package docs
