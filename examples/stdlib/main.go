package main

import "github.com/ratekeeper/ratekeeper/examples/internal/demo"

func main() { demo.Main("stdlib", demo.Routes) }
