module golang.org/x/image

go 1.12

require golang.org/x/text v0.7.0
