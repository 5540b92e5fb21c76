package neardup;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.solr.client.solrj.embedded.SSLConfig;
import org.apache.solr.cloud.MiniSolrCloudCluster;
import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Runs real Apache Solr on 127.0.0.1 until the process is stopped.
 *
 * <pre>
 *   SolrLauncher standalone WORK_DIR PORT CONFIGSET_DIR
 *   SolrLauncher cloud      WORK_DIR NODES CONFIGSET_DIR
 *   SolrLauncher zookeeper  WORK_DIR 0 CONFIGSET_DIR
 *   SolrLauncher node       WORK_DIR PORT ZOOKEEPER
 * </pre>
 *
 * Standalone mode serves cores made from the configset "neardup" (CoreAdmin CREATE with
 * configSet=neardup). Cloud mode starts an embedded ZooKeeper and NODES Solr nodes, and uploads
 * the configset as "neardup" for the Collections API; it prints "ZOOKEEPER HOST:PORT/CHROOT".
 * When Solr is ready, the launcher prints one line per node, "READY http://127.0.0.1:PORT/solr",
 * and then waits. "zookeeper" runs a cluster's ZooKeeper with the configset (and prints READY
 * with its address), "node" one Solr node of that cluster: a cluster whose nodes are processes
 * of their own, which can be killed one at a time. With -Dneardup.keystore=FILE.p12 (and -Dneardup.keystore.password), a
 * standalone Solr serves HTTPS with that keystore's certificate.
 */
public final class SolrLauncher {
  private static final String CONFIGSET = "neardup";
  /** Solr caps clauses per query in solr.xml too; a shingle query has one per shingle. */
  private static final String MAX_CLAUSES =
      "<int name=\"maxBooleanClauses\">${solr.max.booleanClauses:16384}</int>";

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println(
          "usage: SolrLauncher standalone|cloud|zookeeper|node WORK_DIR PORT|NODES"
              + " CONFIGSET_DIR|ZOOKEEPER");
      System.exit(2);
    }
    Path work = Path.of(args[1]).toAbsolutePath();
    Path configset = Path.of(args[3]).toAbsolutePath();
    Files.createDirectories(work);
    List<String> urls = new ArrayList<>();
    Runnable stop;
    if (args[0].equals("zookeeper")) { // a cluster's ZooKeeper alone: its nodes run apart
      MiniSolrCloudCluster cluster = startCloud(work, 0, configset);
      String address = cluster.getZkServer().getZkAddress();
      System.out.println("ZOOKEEPER " + address);
      urls.add(address);
      stop = () -> quietly(cluster::shutdown);
    } else if (args[0].equals("node")) { // one node of a cluster, in a process of its own
      Properties properties = new Properties();
      properties.setProperty("zkHost", args[3]);
      JettyConfig config =
          JettyConfig.builder()
              .setPort(Integer.parseInt(args[2]))
              .setContext("/solr")
              .stopAtShutdown(false)
              .build();
      JettySolrRunner node = new JettySolrRunner(work.toString(), properties, config);
      node.start();
      urls.add(node.getBaseUrl().toString());
      stop = () -> quietly(node::stop);
    } else if (args[0].equals("standalone")) {
      JettySolrRunner solr = startStandalone(work, Integer.parseInt(args[2]), configset);
      urls.add(solr.getBaseUrl().toString());
      stop = () -> quietly(solr::stop);
    } else {
      MiniSolrCloudCluster cluster = startCloud(work, Integer.parseInt(args[2]), configset);
      for (JettySolrRunner node : cluster.getJettySolrRunners()) {
        urls.add(node.getBaseUrl().toString());
      }
      System.out.println("ZOOKEEPER " + cluster.getZkServer().getZkAddress());
      stop = () -> quietly(cluster::shutdown);
    }
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stop.run();
      stopped.countDown();
    }));
    for (String url : urls) {
      System.out.println("READY " + url);
    }
    System.out.flush();
    stopped.await();
  }

  private static JettySolrRunner startStandalone(Path home, int port, Path configset)
      throws Exception {
    copyTree(configset, home.resolve("configsets").resolve(CONFIGSET).resolve("conf"));
    Files.writeString(home.resolve("solr.xml"), "<solr>" + MAX_CLAUSES + "</solr>\n");
    JettyConfig.Builder builder =
        JettyConfig.builder().setPort(port).setContext("/solr").stopAtShutdown(false);
    String keyStore = System.getProperty("neardup.keystore");
    if (keyStore != null) { // HTTPS with the certificate in this PKCS12 keystore
      System.setProperty("jetty.testMode", "true"); // the runner reads its SSL config only then
      String password = System.getProperty("neardup.keystore.password", "");
      builder.withSSLConfig(new SSLConfig(true, false, keyStore, password, keyStore, password));
      builder.useOnlyHttp1(true); // HTTP/1.1 over TLS, as Python clients speak it
    }
    JettyConfig config = builder.build();
    Properties properties = new Properties();
    JettySolrRunner solr = new JettySolrRunner(home.toString(), properties, config);
    solr.start();
    return solr;
  }

  private static MiniSolrCloudCluster startCloud(Path base, int nodes, Path configset)
      throws Exception {
    JettyConfig config = JettyConfig.builder().setContext("/solr").stopAtShutdown(false).build();
    String solrXml =
        MiniSolrCloudCluster.DEFAULT_CLOUD_SOLR_XML.replace("<solr>", "<solr>" + MAX_CLAUSES);
    MiniSolrCloudCluster cluster = new MiniSolrCloudCluster(nodes, base, solrXml, config);
    cluster.uploadConfigSet(configset, CONFIGSET);
    return cluster;
  }

  private static void copyTree(Path from, Path to) throws Exception {
    try (var paths = Files.walk(from)) {
      for (Path source : (Iterable<Path>) paths::iterator) {
        Path target = to.resolve(from.relativize(source).toString());
        if (Files.isDirectory(source)) {
          Files.createDirectories(target);
        } else {
          Files.copy(source, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
      }
    }
  }

  private interface Step {
    void run() throws Exception;
  }

  private static void quietly(Step step) {
    try {
      step.run();
    } catch (Exception e) {
      System.err.println("while stopping Solr: " + e);
    }
  }
}
