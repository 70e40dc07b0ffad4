declare module 'node-zookeeper-client';
