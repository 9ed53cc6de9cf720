// placeholder replaced by the bench program
int main() { return 0; }
