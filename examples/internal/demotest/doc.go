// Package demotest checks that an example service behaves as the README
// says. Both examples run the same checks on their own router, so they
// cannot drift apart.
package demotest
