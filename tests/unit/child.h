// Runs code in a child process, for tests of paths that end the process (shm_fatal: exit 2).
#pragma once
#include <catch2/catch.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

// Runs fn in a child process; returns its exit status and what it wrote to stderr.
inline int run_child(const std::function<void()> &fn, std::string *err) {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(pipefd[0]);
    dup2(pipefd[1], 2);
    fn();
    _exit(0);
  }
  close(pipefd[1]);
  char buf[1024];
  ssize_t k;
  while ((k = read(pipefd[0], buf, sizeof buf)) > 0) err->append(buf, (size_t)k);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
