// Package demo holds what the two example services share: choosing the
// store from the environment, the policies, and the JWT helper. Each
// example only wires these into its router.
package demo
