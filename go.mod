module github.com/ratekeeper/ratekeeper

go 1.26.8
