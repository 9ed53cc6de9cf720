// The entry point of every program shmapc compiles: see shm::runtime_main (cli.cpp).
#include "stats.h"

int main(int argc, char **argv) { return shm::runtime_main(argc, argv); }
