module github.com/cutenative/cutenative/go

go 1.22
