package network

// On Linux every behavioural test runs against both servers.
var implementations = []implementation{
	{"reactor", NewReactorServer},
	{"portable", NewPortableServer},
}
