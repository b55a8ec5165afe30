// Preloaded (NODE_OPTIONS=--import) by test/cpu/process-is-the-job.test.ts: an entry point's worker (the child that
// engine/native-stderr-node.ts marks) stops itself before it loads anything, so the test finds it however loaded the
// machine, even a worker that would end at once with a usage error, and lets it go on (SIGCONT) when it chooses.
if (process.env.WEBGPU_RLHF_STDERR_FILTERED === '1') process.kill(process.pid, 'SIGSTOP');
