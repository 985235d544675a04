module github.com/cutenative/cutenative/examples/go

go 1.22

require github.com/cutenative/cutenative/go v0.0.0

replace github.com/cutenative/cutenative/go => ../../go
