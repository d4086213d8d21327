"""Running untrusted code and stopping cleanly: the sandbox for generated scripts (sandbox/),
temporary folders that never outlive their process (scratch), and SIGINT/SIGTERM handling that
leaves no child behind (stopping)."""
