from tritonkit.cli.app import main

main()
