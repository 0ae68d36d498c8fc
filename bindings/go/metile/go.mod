module metile.dev/metile

go 1.19
