// Package packaging holds no Go code: it is the home of leasecron's
// Debian package description (nfpm.yaml, built by `make package`) and its
// maintainer scripts. Its test builds the package, installs it with
// dpkg -i and checks the installed files (CI only: it changes the system).
package packaging
