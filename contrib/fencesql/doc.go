// Package fencesql holds no code for users: it is the module where package fence's SQL
// statements (github.com/go-redlock/redlock/fence) are tested against real databases, a
// PostgreSQL server that its tests start (initdb into a temporary directory, postgres on a
// 127.0.0.1 port, stopped by PID) and SQLite (modernc.org/sqlite), so that no SQL driver
// enters the main module's go.mod. Package fence itself imports no driver.
//
// The PostgreSQL tests skip, saying why, when initdb and postgres are not installed
// (apt-get install -y postgresql), except with CI=true, where they fail: CI must run them.
package fencesql
