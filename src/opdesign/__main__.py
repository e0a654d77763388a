from opdesign.cli import main

main()
